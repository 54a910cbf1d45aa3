"""A joint trajectory controller's ``constraints``: the tolerances it holds a trajectory to.

joint_trajectory_controller (ros2_controllers ``jazzy`` @ ed360c9) reads them from its
parameters (``joint_trajectory_controller_parameters.yaml``: ``constraints.goal_time``,
``constraints.stopped_velocity_tolerance``, and per joint ``trajectory`` (the path tolerance)
and ``goal``; 0 means "not enforced"); a FollowJointTrajectory goal may override them per goal
(``tolerances.hpp``, ``resolve_tolerance_source``: a value > 0 replaces the default, -1 erases
it, 0 keeps it). The UR driver's defaults (Universal_Robots_ROS2_Driver ``jazzy`` @ a16a268,
``ur_robot_driver/config/ur_controllers.yaml``) are :data:`UR_DEFAULTS`; EROBS's cell
(bondada-a/erobs ``jazzy_dev`` @ 739cc0c,
``src/custom-ur-descriptions/cms_moveit_config/config/ur_base_controllers.yaml``) sets
``trajectory: 0.05``, ``goal: 0.01``.

No ROS import: the simulated hardware reads a controllers YAML with it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from erobs_bt.script.model import JOINT_NAMES
from erobs_bt.validation import Checker, join, read_yaml


@dataclass(frozen=True)
class TrajectoryConstraints:
    """What a joint trajectory controller holds a trajectory to (its ``constraints``).

    Attributes:
        path: [rad] per unprefixed joint name, the largest position error while moving and on
            the first sample (``trajectory``); 0: not enforced.
        goal: [rad] per joint, the largest position error past the last point (``goal``); 0: not
            enforced.
        goal_time: [s] how long past the last point's time the goal tolerance may still be
            reached before GOAL_TOLERANCE_VIOLATED; 0: wait indefinitely.
        stopped_velocity: [rad/s] the largest joint velocity past the last point that counts
            as stopped (the goal's velocity tolerance).
        source: where they were read.
    """

    path: Mapping[str, float] = field(
        default_factory=lambda: MappingProxyType(dict.fromkeys(JOINT_NAMES, 0.2))
    )
    goal: Mapping[str, float] = field(
        default_factory=lambda: MappingProxyType(dict.fromkeys(JOINT_NAMES, 0.1))
    )
    goal_time: float = 0.0
    stopped_velocity: float = 0.2
    source: str = "ur_robot_driver defaults"

    def path_tolerances(self) -> tuple[float, ...]:
        """The path tolerances [rad] in :data:`JOINT_NAMES` order."""
        return tuple(self.path[name] for name in JOINT_NAMES)

    def goal_tolerances(self) -> tuple[float, ...]:
        """The goal tolerances [rad] in :data:`JOINT_NAMES` order."""
        return tuple(self.goal[name] for name in JOINT_NAMES)


#: The UR driver's ``scaled_joint_trajectory_controller`` constraints (ur_controllers.yaml):
#: path 0.2 rad, goal 0.1 rad, goal_time 0, stopped_velocity_tolerance 0.2 rad/s.
UR_DEFAULTS = TrajectoryConstraints()


def resolve_tolerance(default: float, requested: float) -> float:
    """A goal's tolerance over the controller's (``tolerances.hpp``, ``resolve_tolerance_source``):
    ``requested`` > 0 replaces ``default``, -1 erases it (0: not enforced), 0 keeps ``default``.

    Raises:
        ValueError: any other negative value (the controller then keeps all its defaults).
    """
    if requested > 0.0:
        return float(requested)
    if abs(requested + 1.0) < 1.2e-7:  # float epsilon, as the controller compares
        return 0.0
    if requested < 0.0:
        raise ValueError(f"illegal tolerance {requested:g}")
    return float(default)


def read_trajectory_constraints(
    path: Path | str, controller: str, *, joint_prefix: str = ""
) -> TrajectoryConstraints:
    """The ``constraints`` of ``controller`` in a ros2_control controllers YAML.

    Both layouts are read: ``<controller>: ros__parameters: constraints:`` at the top, or under
    a node-name key such as ``/**`` (EROBS's ``ur_base_controllers.yaml``). Per-joint keys
    carry the driver's ``tf_prefix`` (``$(var tf_prefix)`` is read as ``joint_prefix``); a
    joint without an entry is not enforced (0), as in the controller.

    Raises:
        ConfigError: ``<file>: <controller>.ros__parameters.constraints...: <reason>``, or the
            controller is not in the file.
    """
    source = str(path)
    check = Checker(file=source, string_keys=True)
    document = read_yaml(source) or {}
    top = check.mapping(document, "")
    found: Mapping[str, Any] | None = None
    where = ""
    for key, value in top.items():
        if key == controller:
            found, where = value, key
            break
        if isinstance(value, Mapping) and controller in value:
            found, where = value[controller], join(key, controller)
            break
    if found is None:
        raise check.fail(controller, "no such controller in the file")
    params = check.mapping(
        check.mapping(found, where).get("ros__parameters", {}), join(where, "ros__parameters")
    )
    at = join(join(where, "ros__parameters"), "constraints")
    constraints = check.mapping(params.get("constraints", {}) or {}, at)
    path_tol: dict[str, float] = {}
    goal_tol: dict[str, float] = {}
    for name in JOINT_NAMES:
        entry: Any = None
        for key, value in constraints.items():
            if key.replace("$(var tf_prefix)", joint_prefix) == joint_prefix + name:
                entry = check.mapping(value, join(at, key))
        entry = entry or {}
        path_tol[name] = check.number(
            entry.get("trajectory", 0.0), join(at, f"{name}.trajectory"), minimum=0.0
        )
        goal_tol[name] = check.number(entry.get("goal", 0.0), join(at, f"{name}.goal"), minimum=0.0)
    return TrajectoryConstraints(
        path=MappingProxyType(path_tol),
        goal=MappingProxyType(goal_tol),
        goal_time=check.number(
            constraints.get("goal_time", 0.0), join(at, "goal_time"), unit="s", minimum=0.0
        ),
        stopped_velocity=check.number(
            constraints.get("stopped_velocity_tolerance", 0.01),
            join(at, "stopped_velocity_tolerance"),
            unit="rad/s",
            minimum=0.0,
        ),
        source=f"{source}: {controller}",
    )


def joint_values(values: Sequence[float]) -> Mapping[str, float]:
    """``{joint: value}`` of six values in :data:`JOINT_NAMES` order."""
    return MappingProxyType(dict(zip(JOINT_NAMES, (float(v) for v in values), strict=True)))
