"""The packaged hardware YAML (``config/ur5e_ros2_control.yaml``) against EROBS's own files.

EROBS's workspace (``../shared/samples/erobs/workspace``, a copy of bondada-a/erobs
``jazzy_dev`` @ 739cc0c) holds what runs on its cell: the SRDF xacro of its MoveIt
configuration (the grippers' named states), the per-tool controllers YAML (controller names,
types, parameters). Whatever the hardware YAML says about the same things must equal them.
Skipped without ../shared (a clone on its own), a failure in CI (:func:`conftest.require_samples`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import require_samples

from erobs_bt.backends.ros2_control.config import load_hardware_config
from erobs_bt.paths import config_file
from erobs_bt.world.beamline import expand_srdf

MOVEIT_CONFIG = Path("src/custom-ur-descriptions/cms_moveit_config")


@pytest.fixture(scope="module")
def workspace() -> Path:
    return require_samples() / "workspace"


def srdf_group_states(workspace: Path, gripper: str) -> dict[str, dict[str, float]]:
    """``state -> {joint: value}`` of every group_state EROBS's SRDF has with ``gripper:=<gripper>``."""
    srdf = expand_srdf(
        workspace / MOVEIT_CONFIG / "srdf" / "ur.srdf.xacro", gripper, workspace, source="test"
    )
    return {
        str(s.get("name")): {str(j.get("name")): float(j.get("value", "nan")) for j in s.iter("joint")}
        for s in srdf.iter("group_state")
    }


def controllers(workspace: Path, gripper: str) -> dict[str, Any]:
    """``controller -> ros__parameters`` of EROBS's ``<gripper>_controllers.yaml`` overlay."""
    data = yaml.safe_load((workspace / MOVEIT_CONFIG / "config" / f"{gripper}_controllers.yaml").read_text())
    return {name: entry["ros__parameters"] for name, entry in data["/**"].items()}


@pytest.mark.parametrize("gripper", ["hande", "2fg7", "epick"])
def test_the_finger_positions_are_the_group_states_of_erobs_srdf(workspace: Path, gripper: str) -> None:
    adapter = load_hardware_config(config_file("ur5e_ros2_control.yaml")).grippers[gripper]
    states = srdf_group_states(workspace, gripper)
    for name, target in adapter.states.items():
        joints = states[name]
        assert len(joints) == 1, joints  # one commanded finger joint
        (value,) = joints.values()
        assert target.position == pytest.approx(value, abs=1e-9), f"{gripper} {name}: {joints}"
    if adapter.joint:
        assert {j for s in adapter.states for j in states[s]} == {adapter.joint}


def test_the_hande_is_erobs_parallel_gripper_action_controller(workspace: Path) -> None:
    adapter = load_hardware_config(config_file("ur5e_ros2_control.yaml")).grippers["hande"]
    (name, params), *others = controllers(workspace, "hande").items()
    assert not others
    assert params["type"] == "parallel_gripper_action_controller/GripperActionController"
    assert adapter.adapter == "parallel_gripper"
    # The controller's action server is "~/gripper_cmd" (parallel_gripper_action_controller_impl.hpp).
    assert adapter.action == f"/{name}/gripper_cmd"
    assert adapter.joint == params["joint"]
    assert adapter.controller is not None
    assert adapter.controller.goal_tolerance == params["goal_tolerance"]
    assert adapter.controller.allow_stalling is params["allow_stalling"]
    assert adapter.controller.max_effort == params["max_effort"]
    assert params["max_effort_interface"] == ""  # so the goal's effort is ignored: none is sent


def test_the_epick_is_erobs_epick_gripper_action_controller_and_status_publisher(workspace: Path) -> None:
    adapter = load_hardware_config(config_file("ur5e_ros2_control.yaml")).grippers["epick"]
    types = {params["type"]: name for name, params in controllers(workspace, "epick").items()}
    assert adapter.adapter == "epick"
    action = types["epick_controllers/EpickGripperActionController"]
    # Its action server is "~/gripper_cmd" (ros2_epick_gripper epick_gripper_action_controller.cpp).
    assert adapter.action == f"/{action}/gripper_cmd"
    # epick_status_publisher_controller publishes on the absolute /object_detection_status.
    assert "epick_controllers/EpickStatusPublisherController" in types
    assert adapter.status == "/object_detection_status"


#: MoveIt's controller type (moveit_simple_controller_manager) -> the adapters that speak it.
MOVEIT_TYPES = {
    "ParallelGripperCommand": ("parallel_gripper",),
    "GripperCommand": ("gripper_command", "epick"),
}


@pytest.mark.parametrize("gripper", ["hande", "epick", "2fg7"])
def test_the_gripper_actions_are_those_erobs_moveit_drives(workspace: Path, gripper: str) -> None:
    """Each tool's moveit_controllers.yaml (CMS ``config/<gripper>/``) names the gripper
    controller MoveIt sends its goals to on EROBS's cell: ``/<controller>/<action_ns>``."""
    adapter = load_hardware_config(config_file("ur5e_ros2_control.yaml")).grippers[gripper]
    data = yaml.safe_load(
        (workspace / MOVEIT_CONFIG / "config" / gripper / "moveit_controllers.yaml").read_text()
    )
    manager = data["moveit_simple_controller_manager"]
    (name,) = [n for n in manager["controller_names"] if manager[n]["type"] != "FollowJointTrajectory"]
    assert adapter.action == f"/{name}/{manager[name]['action_ns']}"
    assert adapter.adapter in MOVEIT_TYPES[manager[name]["type"]]


# ---------------------------------------------------------------------------------------------
# Deliverable 4: a beamline cell's hardware configuration comes from EROBS's own files
# ---------------------------------------------------------------------------------------------


def test_a_beamline_cells_hardware_is_read_from_erobs_files(workspace: Path, tmp_path: Path) -> None:
    import shutil

    from erobs_bt.backends.ros2_control.config import check_against_cell
    from erobs_bt.backends.ros2_control.erobs_files import hardware_for_cell
    from erobs_bt.world.config import load_cell

    packaged = load_hardware_config(config_file("ur5e_ros2_control.yaml"))
    beamline = Path("src/beambot/config/cms_beamline.yaml")

    # EROBS's files as they are: the packaged configuration's values.
    cell = load_cell(workspace / beamline)
    read = hardware_for_cell(packaged, cell)
    assert dict(read.grippers) == dict(packaged.grippers)
    assert (read.arm_action, read.set_io, read.tool_voltage) == (
        packaged.arm_action,
        packaged.set_io,
        packaged.tool_voltage,
    )
    check_against_cell(read, cell)

    # Changed files: the configuration follows them.
    copy = tmp_path / "workspace"
    shutil.copytree(workspace, copy)
    cms = copy / MOVEIT_CONFIG

    def edit(path: Path, old: str, new: str) -> None:
        text = path.read_text()
        assert old in text, (path, old)
        path.write_text(text.replace(old, new))

    edit(
        cms / "config" / "hande_controllers.yaml",
        "  gripper_action_controller:",
        "  hande_gripper_controller:",
    )
    edit(cms / "config" / "hande_controllers.yaml", "goal_tolerance: 0.01", "goal_tolerance: 0.002")
    edit(cms / "config" / "hande_controllers.yaml", "allow_stalling: false", "allow_stalling: true")
    edit(
        copy / beamline,
        'controller_name: "gripper_action_controller"\n    states:\n      grasp: "hande_closed"',
        'controller_name: "hande_gripper_controller"\n    states:\n      grasp: "hande_closed"',
    )
    edit(cms / "srdf" / "2fg7.srdf.xacro", 'value="0.035"', 'value="0.030"')
    edit(cms / "config" / "epick_controllers.yaml", "  epick_status_publisher_controller:", "  unused:")
    edit(cms / "config" / "epick_controllers.yaml", "EpickStatusPublisherController", "SomethingElse")
    (copy / beamline).write_text(
        (copy / beamline).read_text().replace("tool_voltage: 24", "tool_voltage: 12")
    )

    cell = load_cell(copy / beamline)
    changed = hardware_for_cell(packaged, cell)
    hande = changed.grippers["hande"]
    assert hande.action == "/hande_gripper_controller/gripper_cmd"
    assert hande.controller is not None
    assert (hande.controller.goal_tolerance, hande.controller.allow_stalling) == (0.002, True)
    assert changed.grippers["2fg7"].states["2fg7_open"].position == 0.030
    assert changed.grippers["epick"].status == ""  # no status publisher: a grip is not judged by it
    assert changed.tool_voltage == 12.0
    check_against_cell(changed, cell)


def test_a_beamline_tool_voltage_the_ur_driver_would_not_send_is_a_configuration_error(
    workspace: Path, tmp_path: Path
) -> None:
    import shutil

    from erobs_bt.backends.ros2_control.erobs_files import hardware_for_cell
    from erobs_bt.validation import ConfigError
    from erobs_bt.world.config import load_cell

    packaged = load_hardware_config(config_file("ur5e_ros2_control.yaml"))
    copy = tmp_path / "workspace"
    shutil.copytree(workspace, copy)
    beamline = copy / "src/beambot/config/cms_beamline.yaml"
    beamline.write_text(beamline.read_text().replace("tool_voltage: 24", "tool_voltage: 5"))

    # ur_driver.cpp setToolVoltage sends 0, 12 or 24 V only: 5 V would fail at the first tool exchange.
    with pytest.raises(ConfigError, match=r"grippers\.\w+\.tool_voltage: must be 0, 12 or 24 \(V\)"):
        hardware_for_cell(packaged, load_cell(beamline))
