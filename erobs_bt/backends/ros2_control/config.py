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

import yaml

from erobs_bt.script.model import JOINT_NAMES
from erobs_bt.timeouts import ACCEPTANCE_TIMEOUT, DEFAULT_TIMEOUTS
from erobs_bt.world.cell import CellConfig

#: ur_msgs/srv/SetIO ``fun`` values (ur_msgs SetIO.srv constants; read from the type when built).
FUN_SET_DIGITAL_OUT = 1
FUN_SET_TOOL_VOLTAGE = 4
#: Grippers adapters by kind.
ADAPTERS = ("set_io", "gripper_command")


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
class GripperAdapter:
    """The interface of one gripper.

    Attributes:
        gripper: the cell's gripper name (``epick``, ``hande``, …).
        adapter: ``set_io`` (a tool digital output) or ``gripper_command``.
        pin: the SetIO pin (``set_io``); ur_msgs numbers the tool outputs 16 and 17.
        action: the GripperCommand action (``gripper_command``).
        states: ``end_effector_action -> GripperState``.
    """

    gripper: str
    adapter: str
    states: Mapping[str, GripperState]
    pin: int = 0
    action: str = ""

    def state_for_position(self, position: float) -> str | None:
        """The named state whose GripperCommand position is nearest to ``position``."""
        if not self.states:
            return None
        return min(self.states, key=lambda name: abs(self.states[name].position - position))


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
        timeouts: ``server``, ``acceptance``, ``motion``, ``gripper``, ``pipettor`` [s].
        set_io: the SetIO service.
        tool_voltage: [V] while a tool is attached.
        changer_pin: the tool changer lock's digital output.
        changer_locked_state: its value when locked.
        grippers: adapters by gripper name.
        pipettor_action: the PipettorCommand action.
        source: the file it was read from.
    """

    joint_prefix: str = ""
    joint_states: str = "/joint_states"
    state_timeout: float = 1.0
    start_tolerance: float = 0.01
    arm_action: str = "/scaled_joint_trajectory_controller/follow_joint_trajectory"
    goal_tolerance: float = 0.005
    goal_time_tolerance: float = 0.5
    timeouts: Mapping[str, float] = field(
        default_factory=lambda: MappingProxyType(
            {
                "server": 3.0,
                "acceptance": ACCEPTANCE_TIMEOUT,
                "motion": DEFAULT_TIMEOUTS["moveto"],
                "gripper": DEFAULT_TIMEOUTS["end_effector"],
                "pipettor": DEFAULT_TIMEOUTS["pipettor"],
            }
        )
    )
    set_io: str = "/io_and_status_controller/set_io"
    tool_voltage: float = 24.0
    changer_pin: int = 0
    changer_locked_state: float = 1.0
    grippers: Mapping[str, GripperAdapter] = field(default_factory=lambda: MappingProxyType({}))
    pipettor_action: str = "/pipettor/command"
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
    "tool_changer",
    "grippers",
    "pipettor",
)


def load_hardware_config(path: Path | str) -> HardwareConfig:
    """Read and check a hardware YAML (schema: ``config/ur5e_ros2_control.yaml``).

    Raises:
        ValueError: ``<file>: <key>: <reason>`` for an unknown key or an invalid value.
        OSError: the file cannot be read.
    """
    source = str(path)
    data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    return parse_hardware_config(data, source=source)


def parse_hardware_config(data: Any, *, source: str = "hardware") -> HardwareConfig:
    """Check a hardware mapping (the YAML's content); see :func:`load_hardware_config`."""

    def fail(key: str, reason: str) -> ValueError:
        return ValueError(f"{source}: {key}: {reason}")

    def mapping(value: Any, key: str, allowed: Iterable[str] | None = None) -> Mapping[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise fail(key, f"expected a mapping, got {type(value).__name__}")
        if allowed is not None:
            unknown = sorted(set(value) - set(allowed))
            if unknown:
                raise fail(f"{key}.{unknown[0]}" if key else unknown[0], "unknown key")
        return value

    def number(value: Any, key: str, *, low: float = 0.0, strict: bool = True) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise fail(key, f"expected a finite number, got {value!r}")
        if value < low or (strict and value == low):
            raise fail(key, f"must be {'>' if strict else '>='} {low:g} (got {value!r})")
        return float(value)

    def name(value: Any, key: str) -> str:
        if not isinstance(value, str) or not value.strip():
            raise fail(key, f"expected a non-empty ROS name, got {value!r}")
        return value

    def integer(value: Any, key: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise fail(key, f"expected an integer >= 0, got {value!r}")
        return value

    top = mapping(data, "", _TOP_KEYS)
    defaults = HardwareConfig()
    prefix = top.get("joint_prefix", "")
    if not isinstance(prefix, str):
        raise fail("joint_prefix", f"expected a string, got {prefix!r}")
    arm = mapping(top.get("arm"), "arm", ("action", "goal_tolerance", "goal_time_tolerance"))
    timeouts = dict(defaults.timeouts)
    for key, value in mapping(top.get("timeouts"), "timeouts", tuple(timeouts)).items():
        timeouts[key] = number(value, f"timeouts.{key}")
    io = mapping(top.get("io"), "io", ("set_io", "tool_voltage"))
    changer = mapping(top.get("tool_changer"), "tool_changer", ("pin", "locked_state"))
    grippers: dict[str, GripperAdapter] = {}
    for gripper, raw in mapping(top.get("grippers"), "grippers").items():
        key = f"grippers.{gripper}"
        entry = mapping(raw, key, ("adapter", "pin", "action", "states"))
        adapter = entry.get("adapter")
        if adapter not in ADAPTERS:
            raise fail(f"{key}.adapter", f"must be one of {', '.join(ADAPTERS)} (got {adapter!r})")
        states: dict[str, GripperState] = {}
        for state, value in mapping(entry.get("states"), f"{key}.states").items():
            where = f"{key}.states.{state}"
            if adapter == "set_io":
                states[str(state)] = GripperState(io_state=number(value, where, strict=False))
            else:
                command = mapping(value, where, ("position", "max_effort"))
                if "position" not in command:
                    raise fail(where, "needs position")
                position = command["position"]
                if isinstance(position, bool) or not isinstance(position, int | float):
                    raise fail(f"{where}.position", f"expected a number, got {position!r}")
                states[str(state)] = GripperState(
                    position=float(position),
                    max_effort=number(command.get("max_effort", 0.0), f"{where}.max_effort", strict=False),
                )
        if not states:
            raise fail(f"{key}.states", "must name at least one state")
        if adapter == "set_io" and "pin" not in entry:
            raise fail(f"{key}.pin", "required for the set_io adapter")
        if adapter == "gripper_command" and "action" not in entry:
            raise fail(f"{key}.action", "required for the gripper_command adapter")
        grippers[str(gripper)] = GripperAdapter(
            gripper=str(gripper),
            adapter=str(adapter),
            states=MappingProxyType(states),
            pin=integer(entry.get("pin", 0), f"{key}.pin"),
            action=name(entry["action"], f"{key}.action") if "action" in entry else "",
        )
    pipettor = mapping(top.get("pipettor"), "pipettor", ("action",))
    return HardwareConfig(
        joint_prefix=prefix,
        joint_states=name(top.get("joint_states", defaults.joint_states), "joint_states"),
        state_timeout=number(top.get("state_timeout", defaults.state_timeout), "state_timeout"),
        start_tolerance=number(
            top.get("start_tolerance", defaults.start_tolerance), "start_tolerance", strict=False
        ),
        arm_action=name(arm.get("action", defaults.arm_action), "arm.action"),
        goal_tolerance=number(arm.get("goal_tolerance", defaults.goal_tolerance), "arm.goal_tolerance"),
        goal_time_tolerance=number(
            arm.get("goal_time_tolerance", defaults.goal_time_tolerance),
            "arm.goal_time_tolerance",
            strict=False,
        ),
        timeouts=MappingProxyType(timeouts),
        set_io=name(io.get("set_io", defaults.set_io), "io.set_io"),
        tool_voltage=number(io.get("tool_voltage", defaults.tool_voltage), "io.tool_voltage", strict=False),
        changer_pin=integer(changer.get("pin", defaults.changer_pin), "tool_changer.pin"),
        changer_locked_state=number(
            changer.get("locked_state", defaults.changer_locked_state),
            "tool_changer.locked_state",
            strict=False,
        ),
        grippers=MappingProxyType(grippers),
        pipettor_action=name(pipettor.get("action", defaults.pipettor_action), "pipettor.action"),
        source=source,
    )


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
