"""The hardware configuration of EROBS's cell, from EROBS's own files (issue 36).

When the cell is an EROBS beamline file (``--cell``/``cell_config``, with ``--workspace``; the
compiled cell keeps the beamline file and workspace in ``CellConfig.extra["beamline"]``), what
EROBS's files say about the hardware replaces the hardware YAML's values
(:func:`hardware_for_cell`). What comes from where::

    grippers.<g>.controller_name (beamline file), looked up in
      <moveit_config_package>/config/<g>_controllers.yaml (the per-tool controllers):
        parallel_gripper_action_controller/GripperActionController
                        -> adapter parallel_gripper, action /<name>/gripper_cmd, joint,
                           controller {goal_tolerance, allow_stalling, max_effort}
        epick_controllers/EpickGripperActionController
                        -> adapter epick, action /<name>/gripper_cmd; status
                           /object_detection_status when the file also runs an
                           epick_controllers/EpickStatusPublisherController
      or, for a tool with no controllers file (a driver node of its own, the 2FG7), in
      <moveit_config_package>/config/<g>/moveit_controllers.yaml:
        type GripperCommand -> adapter gripper_command, action /<name>/<action_ns>
    the FollowJointTrajectory controller of those moveit_controllers.yaml files
                        -> arm.action /<name>/<action_ns>
    the ur_controllers/GPIOController of <moveit_config_package>/config/ur_base_controllers.yaml
                        -> io.set_io /<name>/set_io
    the SRDF's group states of grippers.<g>.gripper_group (gripper:=<g>)
                        -> grippers.<g>.states.<state>.position (the one joint's value)
    grippers.<g>.tool_voltage (beamline file)
                        -> io.tool_voltage (the one voltage of every powered tool)

Everything else (timeouts, tolerances, the GripperCommand ``max_effort``, the pipettor's
action, the joint-state topic) stays the base configuration's. The action names follow the
controllers: ``~/gripper_cmd`` of parallel_gripper_action_controller and of the ePick's
controller, ``<name>/<action_ns>`` of MoveIt's simple controller manager. No ROS import.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml

from erobs_bt.backends.ros2_control.config import (
    GripperAdapter,
    GripperState,
    HardwareConfig,
    ParallelGripperParams,
    tool_voltage,
)
from erobs_bt.validation import Checker, ConfigError
from erobs_bt.world.beamline import _find_package, expand_srdf
from erobs_bt.world.cell import CellConfig

#: Controller types of EROBS's per-tool controllers files, by the adapter they mean.
PARALLEL_GRIPPER_TYPE = "parallel_gripper_action_controller/GripperActionController"
EPICK_GRIPPER_TYPE = "epick_controllers/EpickGripperActionController"
EPICK_STATUS_TYPE = "epick_controllers/EpickStatusPublisherController"
GPIO_TYPE = "ur_controllers/GPIOController"
#: The ePick status controller's topic (absolute, fixed in its source).
EPICK_STATUS_TOPIC = "/object_detection_status"


def _read(path: Path) -> Any:
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError("", f"cannot read: {exc}", file=str(path)) from exc


def _spawner_controllers(path: Path) -> dict[str, Mapping[str, Any]]:
    """``name -> ros__parameters`` of a controllers overlay (``/**: <name>: ros__parameters``)."""
    data = _read(path) or {}
    section = data.get("/**") if isinstance(data, dict) else None
    if not isinstance(section, dict):
        raise ConfigError("/**", "expected the controllers under the /** wildcard", file=str(path))
    out: dict[str, Mapping[str, Any]] = {}
    for name, entry in section.items():
        params = entry.get("ros__parameters") if isinstance(entry, dict) else None
        if isinstance(params, dict) and "type" in params:
            out[str(name)] = params
    return out


def _moveit_controllers(path: Path) -> dict[str, Mapping[str, Any]]:
    """``name -> {type, action_ns, ...}`` of a moveit_controllers.yaml."""
    data = _read(path) or {}
    manager = data.get("moveit_simple_controller_manager") if isinstance(data, dict) else None
    if not isinstance(manager, dict):
        raise ConfigError("moveit_simple_controller_manager", "missing", file=str(path))
    return {
        str(n): manager[n] for n in manager.get("controller_names") or [] if isinstance(manager.get(n), dict)
    }


def _group_states(workspace: Path, package_dir: Path, gripper: str, group: str) -> dict[str, float]:
    """``state -> position`` of the SRDF's group states of ``group`` (one joint each)."""
    xacro = package_dir / "srdf" / "ur.srdf.xacro"
    srdf = expand_srdf(xacro, gripper, workspace, source=str(xacro))
    out: dict[str, float] = {}
    for state in srdf.iter("group_state"):
        if state.get("group") != group:
            continue
        joints = [j for j in state.iter("joint")]
        if len(joints) != 1:
            raise ConfigError(
                f"group_state {state.get('name')}",
                f"expected one joint for a gripper state, got {len(joints)}",
                file=str(xacro),
            )
        out[str(state.get("name"))] = float(joints[0].get("value", "nan"))
    return out


def hardware_from_beamline(
    base: HardwareConfig, beamline_file: str | Path, workspace: str | Path
) -> HardwareConfig:
    """``base`` with what EROBS's files say about the hardware (the module docstring's table).

    Args:
        base: the hardware YAML's configuration (kept where EROBS's files say nothing).
        beamline_file: EROBS's beamline YAML (``cms_beamline.yaml``).
        workspace: the workspace root its packages are under (``src/``).

    Raises:
        ConfigError: a file cannot be read, or says something this backend cannot drive
            (naming the file and key).
    """
    source = str(beamline_file)
    root = Path(workspace)
    beamline = _read(Path(beamline_file)) or {}
    robot = beamline.get("robot") or {}
    grippers_in = beamline.get("grippers") or {}
    package = robot.get("moveit_config_package")
    if not package:
        raise ConfigError("robot.moveit_config_package", "missing: no controllers to read", file=source)
    package_dir = _find_package(root, str(package))
    if package_dir is None:
        raise ConfigError(
            "robot.moveit_config_package", f"package {package!r} not found under {root / 'src'}", file=source
        )
    config_dir = package_dir / "config"
    # The beamline's tools only (a base adapter for a tool the beamline lacks would not fit the cell).
    grippers = {g: a for g, a in base.grippers.items() if g in grippers_in}
    arm_actions: set[str] = set()
    voltages: dict[str, float] = {}
    for name, raw in grippers_in.items():
        gripper, entry = str(name), raw or {}
        key = f"grippers.{gripper}"
        volts = tool_voltage(Checker(file=source), entry.get("tool_voltage", 0) or 0, f"{key}.tool_voltage")
        if volts > 0.0:
            voltages[gripper] = volts
        moveit_file = config_dir / gripper / "moveit_controllers.yaml"
        moveit = _moveit_controllers(moveit_file) if moveit_file.is_file() else {}
        for controller, spec in moveit.items():
            if spec.get("type") == "FollowJointTrajectory":
                arm_actions.add(f"/{controller}/{spec.get('action_ns', 'follow_joint_trajectory')}")
        controller_name = str(entry.get("controller_name") or "")
        if not controller_name:
            continue
        group = str(entry.get("gripper_group") or "")
        states = _group_states(root, package_dir, gripper, group) if group else {}
        if not states:
            raise ConfigError(
                f"{key}.gripper_group",
                f"no group states of {group!r} in the SRDF (gripper:={gripper})",
                file=source,
            )
        known = base.grippers.get(gripper)
        controllers_file = config_dir / f"{gripper}_controllers.yaml"
        if controllers_file.is_file():
            spawned = _spawner_controllers(controllers_file)
            params = spawned.get(controller_name)
            if params is None:
                raise ConfigError(
                    f"{key}.controller_name",
                    f"{controller_name!r} is not in {controllers_file} (controllers: {', '.join(spawned)})",
                    file=source,
                )
            kind = params["type"]
            if kind == PARALLEL_GRIPPER_TYPE:
                grippers[gripper] = GripperAdapter(
                    gripper=gripper,
                    adapter="parallel_gripper",
                    states=MappingProxyType({s: GripperState(position=v) for s, v in states.items()}),
                    action=f"/{controller_name}/gripper_cmd",
                    joint=str(params["joint"]),
                    controller=ParallelGripperParams(
                        goal_tolerance=float(
                            params.get("goal_tolerance", ParallelGripperParams.goal_tolerance)
                        ),
                        allow_stalling=bool(
                            params.get("allow_stalling", ParallelGripperParams.allow_stalling)
                        ),
                        max_effort=float(params.get("max_effort", ParallelGripperParams.max_effort)),
                    ),
                )
            elif kind == EPICK_GRIPPER_TYPE:
                has_status = any(p["type"] == EPICK_STATUS_TYPE for p in spawned.values())
                grippers[gripper] = GripperAdapter(
                    gripper=gripper,
                    adapter="epick",
                    states=MappingProxyType({s: GripperState(position=v) for s, v in states.items()}),
                    action=f"/{controller_name}/gripper_cmd",
                    status=EPICK_STATUS_TOPIC if has_status else "",
                    status_timeout=known.status_timeout
                    if known is not None
                    else GripperAdapter.status_timeout,
                )
            else:
                raise ConfigError(
                    f"{controller_name}.type",
                    f"{kind!r}: no adapter drives this controller",
                    file=str(controllers_file),
                )
            continue
        driver = moveit.get(controller_name)
        if driver is None or driver.get("type") != "GripperCommand":
            raise ConfigError(
                f"{key}.controller_name",
                f"{controller_name!r}: neither in {controllers_file} "
                f"nor a GripperCommand controller of {moveit_file}",
                file=source,
            )
        efforts = {s: st.max_effort for s, st in known.states.items()} if known is not None else {}
        grippers[gripper] = GripperAdapter(
            gripper=gripper,
            adapter="gripper_command",
            states=MappingProxyType(
                {s: GripperState(position=v, max_effort=efforts.get(s, 0.0)) for s, v in states.items()}
            ),
            action=f"/{controller_name}/{driver.get('action_ns', 'gripper_cmd')}",
        )
    if len(arm_actions) > 1:
        raise ConfigError(
            "",
            f"the tools' moveit_controllers.yaml name different arm controllers: {sorted(arm_actions)}",
            file=str(config_dir),
        )
    if len(set(voltages.values())) > 1:
        raise ConfigError(
            "grippers.*.tool_voltage",
            f"one tool voltage for every powered tool is supported, got {voltages}",
            file=source,
        )
    set_io = base.set_io
    base_controllers = config_dir / "ur_base_controllers.yaml"
    if base_controllers.is_file():
        manager = ((_read(base_controllers) or {}).get("/**") or {}).get("controller_manager") or {}
        params = manager.get("ros__parameters") or {}
        gpio = [n for n, p in params.items() if isinstance(p, dict) and p.get("type") == GPIO_TYPE]
        if len(gpio) == 1:
            set_io = f"/{gpio[0]}/set_io"
    return replace(
        base,
        arm_action=next(iter(arm_actions)) if arm_actions else base.arm_action,
        set_io=set_io,
        tool_voltage=next(iter(voltages.values())) if voltages else base.tool_voltage,
        grippers=MappingProxyType(grippers),
        source=f"{base.source} + {source}",
    )


def hardware_for_cell(base: HardwareConfig, cell: CellConfig) -> HardwareConfig:
    """``base``, or for a cell read from an EROBS beamline file the configuration of
    :func:`hardware_from_beamline` (the beamline file and workspace the cell was compiled from).

    Raises:
        ConfigError: as :func:`hardware_from_beamline`.
    """
    info = cell.extra.get("beamline")
    if not isinstance(info, Mapping) or not info.get("file") or not info.get("workspace"):
        return base
    return hardware_from_beamline(base, str(info["file"]), str(info["workspace"]))
